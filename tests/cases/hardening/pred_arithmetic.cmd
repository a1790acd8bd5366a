compile pred_arithmetic.hlo -o out.hlo
