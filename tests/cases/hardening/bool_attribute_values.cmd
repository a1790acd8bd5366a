compile bool_attribute_values.hlo -o out.hlo
