compile ../../../examples/mlp_small.hlo --mesh model=2 --report json
