verify ../../../examples/jax_attention.hlo --mesh 2x4
