compile crlf_error.hlo -o out.hlo
