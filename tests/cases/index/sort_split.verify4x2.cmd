verify sort_split.hlo --mesh a=4,b=2
