verify conv_train_height.hlo --mesh x=4,y=1
