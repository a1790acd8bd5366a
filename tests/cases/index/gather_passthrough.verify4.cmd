verify gather_passthrough.hlo --mesh data=1,model=4
