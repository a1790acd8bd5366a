check ../../../examples/mlp.hlo --max-bytes 1.5 --no-budget-file
