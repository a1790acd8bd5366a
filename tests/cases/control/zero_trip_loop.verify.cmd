verify zero_trip_loop.hlo --mesh 4
