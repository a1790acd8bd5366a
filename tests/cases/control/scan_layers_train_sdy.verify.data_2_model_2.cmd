verify scan_layers_train_sdy.hlo --mesh data=2,model=2
