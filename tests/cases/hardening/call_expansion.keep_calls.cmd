compile call_expansion.hlo --mesh 4 --keep-calls -o out.hlo
