compile float_literal_range.hlo -o out.hlo
