verify ../../../examples/positional_small.hlo --mesh 8
