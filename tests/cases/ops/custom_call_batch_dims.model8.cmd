compile custom_call_batch_dims.hlo --mesh model=8 --report text
