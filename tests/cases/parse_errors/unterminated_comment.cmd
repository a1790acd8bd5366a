compile unterminated_comment.hlo -o out.hlo
