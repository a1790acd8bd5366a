verify maximal_root.hlo --mesh model=4
