compile huge_gather.hlo --report json
