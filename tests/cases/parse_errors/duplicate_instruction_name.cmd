compile duplicate_instruction_name.hlo -o out.hlo
