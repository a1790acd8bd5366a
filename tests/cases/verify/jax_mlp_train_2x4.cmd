verify ../../../examples/jax_mlp_train.hlo --mesh 2x4
