sweep ../../../examples/mlp_2d_small.hlo --mesh data=1,2,4 --mesh model=1,2,4 --format csv
