compile device_ids.hlo
