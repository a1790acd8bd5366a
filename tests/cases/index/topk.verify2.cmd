verify topk.hlo --mesh data=1,model=2
