verify loop_body_expansion.hlo --mesh 4
