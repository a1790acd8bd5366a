compile xla_opcodes_not_taken.hlo -o out.hlo
