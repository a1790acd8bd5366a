compile gather_vocab.hlo --report text
