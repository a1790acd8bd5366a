compile ../../../examples/jax_dp_train_zero.hlo --report json
