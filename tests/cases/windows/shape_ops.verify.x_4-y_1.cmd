verify shape_ops.hlo --mesh x=4,y=1
