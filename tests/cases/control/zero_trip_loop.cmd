compile zero_trip_loop.hlo --mesh 4 -o /dev/null
