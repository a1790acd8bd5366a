compile ../../../examples/mlp_2d_small.hlo --report json
