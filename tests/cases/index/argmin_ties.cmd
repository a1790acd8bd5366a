compile argmin_ties.hlo --report text
