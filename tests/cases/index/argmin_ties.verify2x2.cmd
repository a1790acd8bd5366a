verify argmin_ties.hlo --mesh data=2,model=2
