compile dynamic_dimension.hlo -o out.hlo
