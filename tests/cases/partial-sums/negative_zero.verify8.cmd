verify negative_zero.hlo --mesh 8
