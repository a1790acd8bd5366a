compile batch_ragged.hlo -o /dev/null
