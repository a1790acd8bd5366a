verify ints_small.hlo --mesh model=2
