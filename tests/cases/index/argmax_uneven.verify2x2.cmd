verify argmax_uneven.hlo --mesh x=2,y=2
