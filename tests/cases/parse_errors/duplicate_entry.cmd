compile duplicate_entry.hlo -o out.hlo
