verify direct_halo.hlo --mesh x=4,y=1
