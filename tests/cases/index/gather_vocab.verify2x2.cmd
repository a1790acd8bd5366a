verify gather_vocab.hlo --mesh data=2,model=2
