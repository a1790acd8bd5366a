compile several_errors.hlo -o out.hlo
