verify ../../../examples/jax_moe_sdy.hlo --mesh 8
