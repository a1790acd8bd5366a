verify slice_masked.hlo --mesh x=8,y=1
