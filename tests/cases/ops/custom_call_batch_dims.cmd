compile custom_call_batch_dims.hlo --report text
