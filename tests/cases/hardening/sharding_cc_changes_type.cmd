compile sharding_cc_changes_type.hlo -o out.hlo
