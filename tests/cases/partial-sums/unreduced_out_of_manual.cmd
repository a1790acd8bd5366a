verify unreduced_out_of_manual.hlo --mesh 4
