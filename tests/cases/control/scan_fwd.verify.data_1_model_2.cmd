verify scan_fwd.hlo --mesh data=1,model=2
