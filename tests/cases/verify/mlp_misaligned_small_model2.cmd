verify mlp_misaligned_small.hlo --mesh model=2
