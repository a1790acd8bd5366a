verify loop_origin.hlo --mesh 4
