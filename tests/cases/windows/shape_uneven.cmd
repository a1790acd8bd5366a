compile shape_uneven.hlo -o /dev/null
