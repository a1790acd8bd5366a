compile conv_kinds.hlo -o /dev/null
