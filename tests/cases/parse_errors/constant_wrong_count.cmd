compile constant_wrong_count.hlo -o out.hlo
