compile header_only.hlo -o out.hlo
