compile huge_dims.hlo --report json
