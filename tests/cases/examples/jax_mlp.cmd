compile ../../../examples/jax_mlp.hlo --report json
