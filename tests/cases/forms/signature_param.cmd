compile signature_param.hlo --report none
