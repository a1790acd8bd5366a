verify conv_train_batch.hlo --mesh x=2,y=1
