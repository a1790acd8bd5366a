verify smap_scan.hlo --mesh model=4
