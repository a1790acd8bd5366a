verify ../../../examples/mlp_small.hlo --mesh data=2,model=4
