compile shape_ops.hlo --report json
