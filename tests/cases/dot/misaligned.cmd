compile ../../../examples/mlp_misaligned.hlo -o /dev/null --report none --dot -
