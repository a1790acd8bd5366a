compile ../../../examples/positional_1d_small.hlo --report json
