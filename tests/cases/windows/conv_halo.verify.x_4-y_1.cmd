verify conv_halo.hlo --mesh x=4,y=1
