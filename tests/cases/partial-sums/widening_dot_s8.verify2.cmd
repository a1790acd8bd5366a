verify widening_dot_s8.hlo --mesh 2
