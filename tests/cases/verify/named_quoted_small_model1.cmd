verify ../../../examples/named_quoted_small.hlo --mesh model=1
