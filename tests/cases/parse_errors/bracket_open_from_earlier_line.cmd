compile bracket_open_from_earlier_line.hlo -o out.hlo
