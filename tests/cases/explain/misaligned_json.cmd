compile ../../../examples/mlp_misaligned.hlo -o /dev/null --explain --report json
