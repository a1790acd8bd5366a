compile outfeed_tuple_sharding.hlo -o -
