verify batch_split.hlo --mesh a=4
