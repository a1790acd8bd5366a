compile sharding_unknown_axis.hlo -o out.hlo
