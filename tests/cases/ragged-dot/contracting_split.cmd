compile contracting_split.hlo -o /dev/null
