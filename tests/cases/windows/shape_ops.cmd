compile shape_ops.hlo -o /dev/null
