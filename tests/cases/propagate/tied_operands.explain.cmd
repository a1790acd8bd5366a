propagate tied_operands.hlo --explain -o /dev/null
