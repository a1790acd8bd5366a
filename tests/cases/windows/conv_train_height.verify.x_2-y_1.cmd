verify conv_train_height.hlo --mesh x=2,y=1
