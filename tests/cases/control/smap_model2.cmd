compile smap_model2.hlo --mesh model=2 -o /dev/null
