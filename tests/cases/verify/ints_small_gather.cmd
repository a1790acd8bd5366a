verify ints_small.hlo --mesh model=4 --program ints_small_gather.bad.hlo
