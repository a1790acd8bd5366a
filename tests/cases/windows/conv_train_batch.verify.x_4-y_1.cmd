verify conv_train_batch.hlo --mesh x=4,y=1
