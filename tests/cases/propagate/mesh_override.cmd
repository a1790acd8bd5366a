propagate ../../../examples/mlp_small.hlo --mesh model=4
