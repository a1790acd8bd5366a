verify reshard_small.hlo --mesh model=4 --program reshard_small_offsets.bad.hlo
