compile call_tuple.hlo --report json
