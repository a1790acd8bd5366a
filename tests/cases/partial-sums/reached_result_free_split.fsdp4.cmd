compile reached_result_free_split.hlo --mesh data=1,fsdp=4 -o /dev/null
