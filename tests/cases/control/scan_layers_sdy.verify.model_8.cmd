verify scan_layers_sdy.hlo --mesh model=8
