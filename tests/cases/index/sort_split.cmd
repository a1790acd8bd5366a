compile sort_split.hlo --report text
