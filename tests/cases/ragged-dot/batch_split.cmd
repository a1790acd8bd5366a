compile batch_split.hlo -o /dev/null
