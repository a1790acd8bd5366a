verify conv_kinds.hlo --mesh x=8,y=1
