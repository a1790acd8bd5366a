sweep ../../../examples/mlp.hlo --mesh model=2,4,2
