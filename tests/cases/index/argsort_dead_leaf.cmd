compile argsort_dead_leaf.hlo --report text
