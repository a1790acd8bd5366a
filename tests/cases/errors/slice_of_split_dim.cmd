compile slice_of_split_dim.hlo --report json -o slice_of_split_dim.out.hlo
