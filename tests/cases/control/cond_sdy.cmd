compile cond_sdy.hlo --mesh model=8 -o /dev/null
