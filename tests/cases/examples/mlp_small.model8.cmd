compile ../../../examples/mlp_small.hlo --mesh model=8 --report json
