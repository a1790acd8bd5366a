compile typed_operand_mismatch.hlo -o out.hlo
