compile lhs_split_rhs_contracting.hlo -o /dev/null
