verify direct_halo.hlo --mesh x=8,y=1
