compile smap_scan.hlo --mesh model=4 -o /dev/null
