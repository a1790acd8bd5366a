compile rhs_free_split.hlo -o /dev/null
