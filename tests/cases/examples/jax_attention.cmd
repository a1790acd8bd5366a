compile ../../../examples/jax_attention.hlo --report json
