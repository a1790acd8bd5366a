verify ../../../examples/mlp_2d_small.hlo --mesh 2x2
