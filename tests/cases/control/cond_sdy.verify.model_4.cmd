verify cond_sdy.hlo --mesh model=4
