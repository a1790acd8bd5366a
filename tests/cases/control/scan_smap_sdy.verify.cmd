verify scan_smap_sdy.hlo --mesh model=4
