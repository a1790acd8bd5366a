verify nested_calls.hlo
