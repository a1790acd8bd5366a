verify ../../../examples/jax_mlp.hlo --mesh 2x4
