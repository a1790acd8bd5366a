compile known_trip_count_negative.hlo --mesh 4 -o /dev/null
