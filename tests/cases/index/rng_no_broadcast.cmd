verify rng.hlo --mesh data=2,model=2 --program rng_no_broadcast.bad.hlo
