compile sharding_cc_changes_shape.hlo -o out.hlo
