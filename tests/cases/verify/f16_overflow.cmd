verify f16_overflow.hlo
