verify maximal_param.hlo --mesh model=8
