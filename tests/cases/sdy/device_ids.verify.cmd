verify device_ids.hlo
