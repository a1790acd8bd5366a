verify sort_split.hlo --mesh a=2,b=4
