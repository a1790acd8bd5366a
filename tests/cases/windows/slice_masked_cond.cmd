compile slice_masked_cond.hlo -o /dev/null
