compile stray_character.hlo -o out.hlo
