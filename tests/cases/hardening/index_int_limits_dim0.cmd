verify index_int_limits_dim0.hlo --mesh 2
