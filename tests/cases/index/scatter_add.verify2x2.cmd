verify scatter_add.hlo --mesh data=2,model=2
