compile element_type_name.hlo -o element_type_name.out.hlo
