compile nested_calls.hlo
