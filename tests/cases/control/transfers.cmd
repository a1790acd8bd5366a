compile transfers.hlo -o /dev/null
