verify smap_model4.hlo --mesh model=4
