compile metadata_syntax.hlo -o out.hlo
