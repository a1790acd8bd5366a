verify softmax_small.hlo ints_small.hlo
