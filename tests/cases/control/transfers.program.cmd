compile transfers.hlo
