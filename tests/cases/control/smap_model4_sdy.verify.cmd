verify smap_model4_sdy.hlo --mesh model=4
