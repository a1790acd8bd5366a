compile ragged_split.hlo -o /dev/null
