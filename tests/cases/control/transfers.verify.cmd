verify transfers.hlo
