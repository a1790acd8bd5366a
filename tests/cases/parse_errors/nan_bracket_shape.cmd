compile nan_bracket_shape.hlo -o out.hlo
