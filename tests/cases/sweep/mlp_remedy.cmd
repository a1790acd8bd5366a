sweep ../../../examples/mlp.hlo --mesh model=2,3,6 --mesh data=1,2
