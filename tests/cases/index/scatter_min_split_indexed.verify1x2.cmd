verify scatter_min_split_indexed.hlo --mesh data=1,model=2
