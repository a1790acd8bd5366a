verify softmax_small.hlo --mesh data=2,model=2
