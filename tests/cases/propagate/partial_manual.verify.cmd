verify partial_manual.hlo
