verify mlp_misaligned_small.hlo --mesh model=8 --program mlp_misaligned_small_a2a.bad.hlo
