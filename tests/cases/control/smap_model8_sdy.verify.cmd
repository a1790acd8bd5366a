verify smap_model8_sdy.hlo --mesh model=8
