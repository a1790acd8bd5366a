compile cross_replica_all_reduce.hlo -o /dev/null
