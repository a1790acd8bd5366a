compile deep_nesting.hlo --mesh 2 -o out.hlo
