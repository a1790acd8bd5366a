compile slice_window_root.hlo -o /dev/null
