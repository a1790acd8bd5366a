verify argmax_uneven.hlo --mesh x=1,y=8
