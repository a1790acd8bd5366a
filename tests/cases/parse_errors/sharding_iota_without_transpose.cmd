compile sharding_iota_without_transpose.hlo -o out.hlo
