verify ../../../examples/jax_dp_train.hlo --mesh 2x4
