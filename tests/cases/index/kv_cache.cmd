compile kv_cache.hlo --report text
