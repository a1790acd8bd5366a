verify ../../../examples/mlp.hlo --shrink --program mlp.8.hlo
