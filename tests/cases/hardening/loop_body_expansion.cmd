compile loop_body_expansion.hlo --mesh 4 -o out.hlo
