compile func_result_sharding.hlo --report json
