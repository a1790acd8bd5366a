propagate ../../../examples/mlp_small.hlo --output x.hlo -o y.hlo
