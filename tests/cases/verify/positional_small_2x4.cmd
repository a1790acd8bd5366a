verify ../../../examples/positional_small.hlo --mesh 2x4
