compile ../../../examples/mlp_small.hlo --mesh model=1 --report json
