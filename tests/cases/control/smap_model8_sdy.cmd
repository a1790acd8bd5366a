compile smap_model8_sdy.hlo --mesh model=8 -o /dev/null
