verify reduce_window_halo.hlo --mesh x=4,y=1
