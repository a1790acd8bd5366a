verify ../../../examples/jax_attention.hlo --mesh data=2,model=4
