compile enum_attribute_values.hlo -o out.hlo
