verify scan_layers_train_sdy.hlo --mesh model=2
