verify direct_halo.hlo --mesh x=2,y=4
