verify while_2d_sdy.hlo --mesh data=4,model=2
