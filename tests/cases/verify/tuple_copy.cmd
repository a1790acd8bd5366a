verify tuple_copy.hlo --mesh 2
