verify scatter_min_split_indexed.hlo --mesh data=2,model=4
