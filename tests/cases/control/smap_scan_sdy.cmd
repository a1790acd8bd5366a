compile smap_scan_sdy.hlo --mesh model=4 -o /dev/null
