compile contracting_ragged.hlo -o /dev/null
