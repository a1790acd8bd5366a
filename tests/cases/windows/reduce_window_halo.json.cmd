compile reduce_window_halo.hlo --report json
