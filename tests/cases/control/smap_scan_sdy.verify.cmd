verify smap_scan_sdy.hlo --mesh model=4
