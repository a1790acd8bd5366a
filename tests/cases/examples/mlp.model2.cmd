compile ../../../examples/mlp.hlo --mesh model=2 --report json
