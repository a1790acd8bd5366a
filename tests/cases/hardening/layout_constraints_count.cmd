compile layout_constraints_count.hlo -o out.hlo
