compile argmax.hlo --report text
