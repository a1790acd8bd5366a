verify ../../../examples/models/windows/cnn_height.hlo --mesh space=8 --shrink
