verify call_tuple.hlo
