compile reduce_window_halo.hlo -o /dev/null
