verify take_along_axis.hlo --mesh data=2,model=4
