verify select_and_scatter_halo.hlo --mesh x=2,y=2
