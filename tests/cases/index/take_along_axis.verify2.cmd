verify take_along_axis.hlo --mesh data=1,model=2
