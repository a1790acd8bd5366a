compile sdy_border_changes_type.hlo -o out.hlo
