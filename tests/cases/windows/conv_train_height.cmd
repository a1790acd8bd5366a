compile conv_train_height.hlo -o /dev/null
