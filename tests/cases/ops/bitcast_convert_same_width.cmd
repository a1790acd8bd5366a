compile bitcast_convert_same_width.hlo --report json
