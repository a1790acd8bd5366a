verify shape_uneven.hlo --mesh x=4,y=1
