compile computation_defined_after_use.hlo -o out.hlo
