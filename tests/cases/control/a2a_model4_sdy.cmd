compile a2a_model4_sdy.hlo --mesh model=4 -o /dev/null
