compile scan_fwd.hlo -o /dev/null
