verify reshard_small.hlo --mesh model=4
