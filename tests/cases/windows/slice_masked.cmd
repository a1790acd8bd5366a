compile slice_masked.hlo -o /dev/null
