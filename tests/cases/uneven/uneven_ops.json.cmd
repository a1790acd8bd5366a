compile uneven_ops.hlo --report json
