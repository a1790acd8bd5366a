check ../../../examples/mlp.hlo --budget digit_groups.budget
