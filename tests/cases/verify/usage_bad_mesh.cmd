verify softmax_small.hlo --mesh 0
