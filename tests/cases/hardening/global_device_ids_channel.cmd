compile global_device_ids_channel.hlo -o out.hlo
