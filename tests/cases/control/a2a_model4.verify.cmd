verify a2a_model4.hlo --mesh model=4
