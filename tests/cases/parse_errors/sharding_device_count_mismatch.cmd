compile sharding_device_count_mismatch.hlo -o out.hlo
