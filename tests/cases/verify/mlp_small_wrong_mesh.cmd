verify ../../../examples/mlp_small.hlo --mesh model=4 --program mlp_small_groups.bad.hlo
