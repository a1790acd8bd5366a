check ../../../examples/mlp.hlo --budget mesh_x4.budget
