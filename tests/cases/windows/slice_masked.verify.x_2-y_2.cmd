verify slice_masked.hlo --mesh x=2,y=2
