verify unreduced_accumulator.hlo --mesh a=2,b=2
