compile device_ids_shard_map.hlo -o out.hlo
