compile gather_small_table.hlo --report text
