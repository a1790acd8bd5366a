verify while_2d.hlo --mesh data=2,model=4
