compile huge_shape.hlo -o out.hlo
