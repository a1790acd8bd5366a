compile missing_equals.hlo -o out.hlo
