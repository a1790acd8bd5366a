verify nested_tuple_reshard.hlo --mesh 2
