verify argmax_uneven.hlo --mesh x=8,y=1
