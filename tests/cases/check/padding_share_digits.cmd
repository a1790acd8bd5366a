check ../uneven/uneven_ops.hlo --no-budget-file --max-padding 11%
