check ../../../examples/mlp.hlo --no-budget-file --max-bytes 234,881,024 --max-collectives 1
