compile attribute_not_taken.hlo -o out.hlo
