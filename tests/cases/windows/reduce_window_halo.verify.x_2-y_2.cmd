verify reduce_window_halo.hlo --mesh x=2,y=2
