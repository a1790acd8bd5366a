compile ../control/scan_fwd.hlo -o /dev/null --report none --dot -
