compile ../../../examples/named_quoted_small.hlo --report json
