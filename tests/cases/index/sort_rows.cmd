compile sort_rows.hlo --report text
