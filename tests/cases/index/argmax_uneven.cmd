compile argmax_uneven.hlo --report text
