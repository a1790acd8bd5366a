compile unreached_result_batch_split.hlo --mesh model=4 --report json -o /dev/null
