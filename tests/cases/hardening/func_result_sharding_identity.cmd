compile func_result_sharding_identity.hlo -o out.hlo
