verify rebroadcast.hlo
