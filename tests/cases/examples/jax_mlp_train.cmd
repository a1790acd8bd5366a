compile ../../../examples/jax_mlp_train.hlo --report json
