sweep ../../../examples/mlp_misaligned.hlo --mesh model=1,2,8 --format json
