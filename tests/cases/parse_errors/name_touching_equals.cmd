compile name_touching_equals.hlo -o out.hlo
