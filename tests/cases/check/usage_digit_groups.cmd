check ../../../examples/mlp.hlo --no-budget-file --max-bytes 2,8672
