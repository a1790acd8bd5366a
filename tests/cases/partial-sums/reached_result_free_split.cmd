compile reached_result_free_split.hlo -o /dev/null
