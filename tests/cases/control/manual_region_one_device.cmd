compile manual_region_one_device.hlo --mesh 1
