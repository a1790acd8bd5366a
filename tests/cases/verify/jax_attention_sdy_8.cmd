verify ../../../examples/jax_attention_sdy.hlo --mesh 8
