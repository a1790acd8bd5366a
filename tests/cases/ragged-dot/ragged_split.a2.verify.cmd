verify ragged_split.hlo --mesh a=2
