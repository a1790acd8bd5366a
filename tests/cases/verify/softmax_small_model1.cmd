verify softmax_small.hlo --mesh model=1
