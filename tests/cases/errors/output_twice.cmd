compile ../../../examples/mlp_small.hlo -o x.hlo -o y.hlo
