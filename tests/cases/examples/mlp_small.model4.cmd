compile ../../../examples/mlp_small.hlo --mesh model=4 --report json
