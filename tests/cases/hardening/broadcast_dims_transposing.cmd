verify broadcast_dims_transposing.hlo --mesh 2
