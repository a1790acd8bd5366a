compile scatter_assign.hlo --report text
