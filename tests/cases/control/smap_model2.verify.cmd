verify smap_model2.hlo --mesh model=2
