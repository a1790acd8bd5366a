compile device_order.hlo --dump-after propagate --report none
