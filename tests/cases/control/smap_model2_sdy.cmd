compile smap_model2_sdy.hlo --mesh model=2 -o /dev/null
