verify reached_result_free_split.hlo --mesh data=2,fsdp=4
