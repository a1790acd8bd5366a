compile plain_iota_hint.hlo --mesh 3x2 --report json
