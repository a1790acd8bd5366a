verify ../../../examples/jax_mlp_sdy.hlo --mesh 8
