compile unknown_opcode_attributes.hlo -o out.hlo
