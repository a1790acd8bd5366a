verify interp_int_limits.hlo --mesh 1
