compile compare_type_for_element_type.hlo -o out.hlo
