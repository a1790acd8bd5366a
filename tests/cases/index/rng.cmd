compile rng.hlo --report text
