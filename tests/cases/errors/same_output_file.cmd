compile huge_shape.hlo -o same.out --report-out same.out
