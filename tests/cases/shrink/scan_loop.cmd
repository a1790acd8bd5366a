verify ../control/scan_fwd.hlo --shrink
