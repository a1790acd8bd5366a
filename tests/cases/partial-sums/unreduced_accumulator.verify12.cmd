verify unreduced_accumulator.hlo --mesh a=1,b=2
