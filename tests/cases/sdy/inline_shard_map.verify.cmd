verify inline_shard_map.hlo
