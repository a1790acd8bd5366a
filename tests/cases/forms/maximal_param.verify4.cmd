verify maximal_param.hlo --mesh model=4
