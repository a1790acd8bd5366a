compile undefined_operand.hlo -o out.hlo
