verify ../../../examples/mlp_2d_small.hlo --mesh data=1,model=1
