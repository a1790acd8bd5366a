verify gather_vocab.hlo --mesh data=1,model=4
