verify tied_operands.hlo --mesh x=4,y=2
