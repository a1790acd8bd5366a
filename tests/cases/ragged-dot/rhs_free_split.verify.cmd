verify rhs_free_split.hlo --mesh a=4
