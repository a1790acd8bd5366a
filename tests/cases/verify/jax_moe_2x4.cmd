verify ../../../examples/jax_moe.hlo --mesh 2x4
