compile scan_smap_sdy.hlo --mesh model=4 -o /dev/null
