compile param_propagated.hlo --report text
