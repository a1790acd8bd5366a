verify conv_train_height.hlo --mesh x=8,y=1
