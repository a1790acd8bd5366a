compile huge_integer.hlo -o out.hlo
