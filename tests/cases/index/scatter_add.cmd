compile scatter_add.hlo --report text
