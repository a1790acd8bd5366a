compile pad_negative_interior.hlo -o out.hlo
