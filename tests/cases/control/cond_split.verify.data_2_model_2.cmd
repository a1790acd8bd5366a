verify cond_split.hlo --mesh data=2,model=2
