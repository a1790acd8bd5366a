verify param_propagated.hlo
