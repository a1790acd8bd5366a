compile duplicate_attribute.hlo -o out.hlo
