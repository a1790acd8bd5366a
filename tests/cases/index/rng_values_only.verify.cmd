verify rng_values_only.hlo
