compile ../../../examples/mlp_2d_small.hlo --mesh data=4,model=2 --report json
