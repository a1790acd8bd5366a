verify ../../../examples/positional_small.hlo
