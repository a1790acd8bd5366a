verify select_and_scatter_halo.hlo --mesh x=4,y=1
