compile sort_of_split_dim.hlo --report json -o sort_of_split_dim.out.hlo
