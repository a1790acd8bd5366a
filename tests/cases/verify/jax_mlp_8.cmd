verify ../../../examples/jax_mlp.hlo --mesh 8
