verify cond_sdy.hlo --mesh data=2,model=4
