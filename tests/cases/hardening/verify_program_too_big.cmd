verify verify_program_too_big.hlo --mesh 4
