verify ../../../examples/jax_mlp_train.hlo
