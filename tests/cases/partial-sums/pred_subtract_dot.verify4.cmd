verify pred_subtract_dot.hlo --mesh 4
