verify ../../../examples/jax_dp_train_zero.hlo
