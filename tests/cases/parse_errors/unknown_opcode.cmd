compile unknown_opcode.hlo -o out.hlo
