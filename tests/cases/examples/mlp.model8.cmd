compile ../../../examples/mlp.hlo --mesh model=8 --report json
