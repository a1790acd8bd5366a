compile unknown_attribute.hlo -o out.hlo
