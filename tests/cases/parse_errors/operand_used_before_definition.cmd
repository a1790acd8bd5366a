compile operand_used_before_definition.hlo -o out.hlo
