compile two_roots.hlo -o out.hlo
