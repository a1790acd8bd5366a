compile unknown_computation.hlo -o out.hlo
