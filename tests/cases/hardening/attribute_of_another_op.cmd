compile attribute_of_another_op.hlo -o out.hlo
