compile nul_byte.hlo -o out.hlo
