verify ../../../examples/jax_dp_train.hlo
