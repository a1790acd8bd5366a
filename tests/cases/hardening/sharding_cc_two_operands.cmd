compile sharding_cc_two_operands.hlo -o out.hlo
