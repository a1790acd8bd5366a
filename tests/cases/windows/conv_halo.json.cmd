compile conv_halo.hlo --report json
