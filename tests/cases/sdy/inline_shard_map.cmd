compile inline_shard_map.hlo --report none
