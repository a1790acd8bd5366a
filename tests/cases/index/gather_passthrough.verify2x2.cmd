verify gather_passthrough.hlo --mesh data=2,model=2
