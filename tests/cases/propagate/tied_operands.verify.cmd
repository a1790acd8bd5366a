verify tied_operands.hlo
