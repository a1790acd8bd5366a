verify while_2d.hlo --mesh data=1,model=2
