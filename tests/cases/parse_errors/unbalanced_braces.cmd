compile unbalanced_braces.hlo -o out.hlo
