compile compare_without_direction.hlo -o out.hlo
