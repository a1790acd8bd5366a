compile constant_one_value.hlo --mesh 2 --report none
