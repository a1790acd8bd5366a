compile known_trip_count_overflow.hlo --mesh 4 -o /dev/null
