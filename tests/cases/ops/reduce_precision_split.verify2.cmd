verify reduce_precision_split.hlo --mesh model=2
