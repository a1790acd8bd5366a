compile partial_manual.hlo -o /dev/null
