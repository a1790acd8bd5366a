verify conv_train_batch.hlo --mesh x=8,y=1
