verify slice_masked_cond.hlo --mesh x=4,y=1
