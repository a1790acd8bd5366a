verify ../../../examples/jax_moe.hlo --mesh 8
