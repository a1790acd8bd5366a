propagate empty_tuple_sharding.hlo --explain
