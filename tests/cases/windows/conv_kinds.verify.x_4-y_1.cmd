verify conv_kinds.hlo --mesh x=4,y=1
