compile scan_smap.hlo --mesh model=4 -o /dev/null
