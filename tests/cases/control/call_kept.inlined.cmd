compile call_kept.hlo -o /dev/null
