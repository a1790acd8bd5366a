compile ../../../examples/jax_dp_train.hlo --report json
