verify cond_sdy.hlo --mesh model=2
