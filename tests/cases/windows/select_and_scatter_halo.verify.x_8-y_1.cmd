verify select_and_scatter_halo.hlo --mesh x=8,y=1
