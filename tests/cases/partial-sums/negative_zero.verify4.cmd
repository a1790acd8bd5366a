verify negative_zero.hlo --mesh 4
