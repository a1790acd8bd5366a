compile reduce_precision_split.hlo --report text
