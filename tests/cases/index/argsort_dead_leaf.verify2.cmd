verify argsort_dead_leaf.hlo --mesh model=2
