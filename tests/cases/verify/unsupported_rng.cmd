verify unsupported_rng.hlo --mesh 2
