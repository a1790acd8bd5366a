check ../../../examples/mlp.hlo --budget bom.budget
