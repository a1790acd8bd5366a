compile pad_numbers_per_dim.hlo -o out.hlo
