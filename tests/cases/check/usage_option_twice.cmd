check ../../../examples/mlp.hlo --no-budget-file --max-bytes 224MiB --forbid all-to-all --limit bytes_per_device=1GiB
