compile cond_split.hlo -o /dev/null
