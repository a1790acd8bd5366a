sweep ../../../examples/mlp.hlo
