verify no_such_file.hlo
