compile manual_sharding_on_automatic.hlo --mesh 4 -o /dev/null
