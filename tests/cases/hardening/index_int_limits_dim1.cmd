verify index_int_limits_dim1.hlo --mesh 2
