propagate ../../../examples/jax_mlp_sdy.hlo
