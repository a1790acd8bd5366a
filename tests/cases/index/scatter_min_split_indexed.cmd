compile scatter_min_split_indexed.hlo -o /dev/null
