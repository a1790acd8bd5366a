compile rng_bit_generator_state.hlo -o out.hlo
