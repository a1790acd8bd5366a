check ../../../examples/mlp_small.hlo --budget bad.budget
