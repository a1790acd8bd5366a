compile recovery_next_line.hlo -o out.hlo
