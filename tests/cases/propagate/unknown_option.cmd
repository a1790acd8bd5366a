propagate reshape.hlo --report text
