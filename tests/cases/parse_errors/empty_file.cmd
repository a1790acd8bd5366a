compile empty_file.hlo -o out.hlo
