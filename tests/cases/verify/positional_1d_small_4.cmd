verify ../../../examples/positional_1d_small.hlo --mesh 4
