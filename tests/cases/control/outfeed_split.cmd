compile outfeed_split.hlo -o /dev/null
