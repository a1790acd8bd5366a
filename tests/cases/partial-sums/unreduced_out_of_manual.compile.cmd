compile unreduced_out_of_manual.hlo -o out.hlo
