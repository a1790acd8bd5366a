compile while_2d.hlo --mesh data=2,model=2 --report json
