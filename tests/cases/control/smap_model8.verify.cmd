verify smap_model8.hlo --mesh model=8
