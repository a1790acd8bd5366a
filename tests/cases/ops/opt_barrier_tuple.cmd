compile opt_barrier_tuple.hlo --report json
