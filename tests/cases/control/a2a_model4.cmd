compile a2a_model4.hlo --mesh model=4 -o /dev/null
