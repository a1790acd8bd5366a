verify shape_ops.hlo --mesh x=2,y=2
