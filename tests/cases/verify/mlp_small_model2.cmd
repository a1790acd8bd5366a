verify ../../../examples/mlp_small.hlo --mesh model=2
