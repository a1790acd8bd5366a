compile negative_zero.hlo --mesh 4
