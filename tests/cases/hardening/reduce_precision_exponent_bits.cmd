compile reduce_precision_exponent_bits.hlo -o out.hlo
