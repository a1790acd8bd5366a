compile ../../../examples/mlp_small.hlo --mesh model=4
