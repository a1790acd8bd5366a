compile rng_values_only.hlo
