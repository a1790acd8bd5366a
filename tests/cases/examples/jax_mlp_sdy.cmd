compile ../../../examples/jax_mlp_sdy.hlo --report json
