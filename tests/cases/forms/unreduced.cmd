compile unreduced.hlo --report text
