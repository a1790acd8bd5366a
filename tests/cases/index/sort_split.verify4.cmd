verify sort_split.hlo --mesh a=1,b=4
