compile gather_passthrough.hlo --report text
