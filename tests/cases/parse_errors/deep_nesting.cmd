compile deep_nesting.hlo -o out.hlo
