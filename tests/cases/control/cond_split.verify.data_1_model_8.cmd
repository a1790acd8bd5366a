verify cond_split.hlo --mesh data=1,model=8
