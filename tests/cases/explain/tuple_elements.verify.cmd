verify tuple_elements.hlo
