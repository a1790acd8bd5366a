compile widening_dot_s8.hlo --mesh 4
