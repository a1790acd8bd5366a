compile nested_tuple_sharding.hlo -o out.hlo
