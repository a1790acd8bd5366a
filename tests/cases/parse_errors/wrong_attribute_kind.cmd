compile wrong_attribute_kind.hlo -o out.hlo
