verify syntax_error.hlo
