check ../../../examples/mlp.hlo --mesh model=4
