compile nan_bracket_literal.hlo -o out.hlo
