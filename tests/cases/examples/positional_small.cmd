compile ../../../examples/positional_small.hlo --report json
