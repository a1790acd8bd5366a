compile unreduced_accumulator.hlo -o /dev/null
