verify outfeed_token_sharding.hlo --mesh 2
