verify scatter_add.hlo --mesh data=1,model=8
