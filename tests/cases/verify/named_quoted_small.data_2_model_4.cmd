verify ../../../examples/named_quoted_small.hlo --mesh data=2,model=4
