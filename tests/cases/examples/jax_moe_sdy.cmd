compile ../../../examples/jax_moe_sdy.hlo --report json
