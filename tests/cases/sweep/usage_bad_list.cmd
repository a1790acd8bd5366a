sweep ../../../examples/mlp.hlo --mesh model=1,,2
