verify verify_gather_too_big.hlo --mesh 4
