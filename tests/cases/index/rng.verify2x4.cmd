verify rng.hlo --mesh data=2,model=4
