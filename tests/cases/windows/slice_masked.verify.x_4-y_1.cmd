verify slice_masked.hlo --mesh x=4,y=1
