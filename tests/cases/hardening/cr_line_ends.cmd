verify cr_line_ends.hlo
