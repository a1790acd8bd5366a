compile conv_train_height.hlo --report json
