compile stray_word_after_instruction.hlo -o out.hlo
