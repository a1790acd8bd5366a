verify kv_cache.hlo --mesh data=1,model=2
