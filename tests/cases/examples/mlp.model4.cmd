compile ../../../examples/mlp.hlo --mesh model=4 --report json
