verify ../../../examples/jax_mlp_sdy.hlo --mesh 2x4 --shrink
