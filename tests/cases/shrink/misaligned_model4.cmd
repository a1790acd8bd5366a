verify ../../../examples/mlp_misaligned.hlo --mesh model=4 --shrink
