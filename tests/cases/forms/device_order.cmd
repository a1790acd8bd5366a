compile device_order.hlo --report text
