verify dynamic_slice.hlo --mesh data=1,model=2
