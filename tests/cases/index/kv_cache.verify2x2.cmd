verify kv_cache.hlo --mesh data=2,model=2
