compile conv_train_batch.hlo -o /dev/null
