verify contracting_split.hlo --mesh a=2
