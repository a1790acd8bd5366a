verify while_2d_sdy.hlo --mesh data=1,model=4
