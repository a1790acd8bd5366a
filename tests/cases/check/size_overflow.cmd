check ../../../examples/mlp.hlo --budget huge.budget
