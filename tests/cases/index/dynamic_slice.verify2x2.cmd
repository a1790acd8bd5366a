verify dynamic_slice.hlo --mesh data=2,model=2
