verify ../../../examples/jax_attention_sdy.hlo --mesh 2x4
