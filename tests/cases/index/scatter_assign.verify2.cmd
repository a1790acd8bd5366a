verify scatter_assign.hlo --mesh data=1,model=2
