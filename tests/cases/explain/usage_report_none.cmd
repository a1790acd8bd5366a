compile ../../../examples/mlp.hlo --mesh model=4 -o /dev/null --report none --explain
