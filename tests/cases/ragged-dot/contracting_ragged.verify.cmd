verify contracting_ragged.hlo --mesh a=4
