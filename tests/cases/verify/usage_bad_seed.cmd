verify softmax_small.hlo --seed x1
