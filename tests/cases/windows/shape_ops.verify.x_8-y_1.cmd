verify shape_ops.hlo --mesh x=8,y=1
