verify scatter_assign.hlo --mesh data=2,model=4
