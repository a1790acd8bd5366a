compile recovery_forgets_dropped_brackets.hlo -o out.hlo
