check ../../../examples/mlp.hlo --budget empty.budget
