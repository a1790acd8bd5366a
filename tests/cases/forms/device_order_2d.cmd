compile device_order_2d.hlo --report text
