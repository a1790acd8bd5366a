verify ../../../examples/mlp_small.hlo --seed 1 --seed 2
