verify ../../../examples/mlp_small.hlo --mesh model=8 --program mlp_small_no_allreduce.bad.hlo
