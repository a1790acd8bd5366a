compile ../../../examples/mlp_misaligned.hlo --mesh model=4 --report json
