compile rebroadcast.hlo -o -
