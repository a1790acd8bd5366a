verify argmin_ties.hlo --mesh data=1,model=2
