verify scan_smap.hlo --mesh model=4
