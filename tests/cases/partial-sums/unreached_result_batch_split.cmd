compile unreached_result_batch_split.hlo -o /dev/null
