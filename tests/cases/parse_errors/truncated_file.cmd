compile truncated_file.hlo -o out.hlo
