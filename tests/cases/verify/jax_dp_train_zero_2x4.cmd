verify ../../../examples/jax_dp_train_zero.hlo --mesh 2x4
