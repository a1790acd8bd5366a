compile ../../../examples/jax_attention_sdy.hlo --report json
