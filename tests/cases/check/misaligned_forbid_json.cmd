check ../../../examples/mlp_misaligned.hlo --no-budget-file --forbid all-to-all --max-bytes 240MB --report json
