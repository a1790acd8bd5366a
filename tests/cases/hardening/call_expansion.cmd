compile call_expansion.hlo --mesh 4 -o out.hlo
