verify slice_masked_cond.hlo --mesh x=8,y=1
