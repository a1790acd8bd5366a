verify constant_one_value.hlo --mesh 2
