verify index_int_limits_2d.hlo --mesh 4
