compile take_along_axis.hlo --report text
