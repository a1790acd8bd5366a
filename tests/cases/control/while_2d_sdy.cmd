compile while_2d_sdy.hlo --mesh data=2,model=4 -o /dev/null
