compile while_2d.hlo -o /dev/null
