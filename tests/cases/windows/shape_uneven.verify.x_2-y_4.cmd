verify shape_uneven.hlo --mesh x=2,y=4
