verify softmax_small.hlo --frobnicate
