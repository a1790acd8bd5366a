compile ../../../examples/jax_moe.hlo --report json
