compile named_axis_refs.hlo -o out.hlo
