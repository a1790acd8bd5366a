verify conv_kinds.hlo --mesh x=2,y=4
