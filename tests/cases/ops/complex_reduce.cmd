compile complex_reduce.hlo --report text
