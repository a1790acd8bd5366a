verify rng.hlo --mesh data=1,model=4
