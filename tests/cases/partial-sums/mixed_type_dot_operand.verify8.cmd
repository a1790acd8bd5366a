verify mixed_type_dot_operand.hlo --mesh 8
