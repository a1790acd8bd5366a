check ../../../examples/mlp.hlo --budget nul_byte.budget
