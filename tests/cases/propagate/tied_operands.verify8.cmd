verify tied_operands.hlo --mesh x=2,y=4
