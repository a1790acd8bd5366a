compile control_predecessors.hlo -o out.hlo
