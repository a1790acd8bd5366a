verify ../../../examples/mlp.hlo --shrink
