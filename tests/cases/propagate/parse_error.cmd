propagate broken.hlo -o out.hlo
