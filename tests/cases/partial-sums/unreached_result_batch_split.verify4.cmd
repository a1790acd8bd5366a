verify unreached_result_batch_split.hlo --mesh model=4
