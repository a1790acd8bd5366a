check ../../../examples/mlp.hlo --budget twice.budget
