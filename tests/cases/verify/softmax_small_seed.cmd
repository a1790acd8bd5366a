verify softmax_small.hlo --seed 12345
