compile broadcast_dims_repeated.hlo -o out.hlo
