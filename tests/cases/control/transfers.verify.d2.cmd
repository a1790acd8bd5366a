verify transfers.hlo --mesh d=2
