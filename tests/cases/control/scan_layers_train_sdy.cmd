compile scan_layers_train_sdy.hlo --mesh model=8 -o /dev/null
