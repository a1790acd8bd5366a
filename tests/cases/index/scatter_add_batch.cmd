compile scatter_add_batch.hlo --report text
