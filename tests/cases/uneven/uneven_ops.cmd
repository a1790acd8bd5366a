compile uneven_ops.hlo -o /dev/null
