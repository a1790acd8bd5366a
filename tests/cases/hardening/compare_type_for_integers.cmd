compile compare_type_for_integers.hlo -o out.hlo
