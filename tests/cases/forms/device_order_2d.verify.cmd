verify device_order_2d.hlo
