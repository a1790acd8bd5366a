verify batch_ragged.hlo --mesh a=4
