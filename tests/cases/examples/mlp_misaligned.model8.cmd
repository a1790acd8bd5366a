compile ../../../examples/mlp_misaligned.hlo --mesh model=8 --report json
