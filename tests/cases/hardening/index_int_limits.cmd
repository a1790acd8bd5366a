verify index_int_limits.hlo --mesh 2
