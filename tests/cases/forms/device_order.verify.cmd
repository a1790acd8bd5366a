verify device_order.hlo
