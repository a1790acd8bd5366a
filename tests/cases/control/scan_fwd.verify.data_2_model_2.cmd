verify scan_fwd.hlo --mesh data=2,model=2
