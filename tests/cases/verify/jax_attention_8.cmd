verify ../../../examples/jax_attention.hlo --mesh 8
