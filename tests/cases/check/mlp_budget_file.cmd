check ../../../examples/mlp.hlo
