compile maximal_param.hlo --report text
