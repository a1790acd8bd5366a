verify call_expansion.hlo --mesh 4
