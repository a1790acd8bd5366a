verify softmax_small.hlo --mesh
