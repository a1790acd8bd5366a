verify ../../../examples/mlp_2d_small.hlo --mesh data=2,model=4
