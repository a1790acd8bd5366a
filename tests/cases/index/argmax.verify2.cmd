verify argmax.hlo --mesh data=1,model=2
