verify slice_masked_cond.hlo --mesh x=2,y=2
