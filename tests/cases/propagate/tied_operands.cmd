compile tied_operands.hlo -o /dev/null
