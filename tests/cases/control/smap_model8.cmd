compile smap_model8.hlo --mesh model=8 -o /dev/null
