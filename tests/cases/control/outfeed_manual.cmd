compile outfeed_manual.hlo --mesh 2
