compile unterminated_string.hlo -o out.hlo
