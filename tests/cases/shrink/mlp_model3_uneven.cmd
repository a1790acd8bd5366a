verify ../../../examples/mlp.hlo --mesh model=3 --shrink
