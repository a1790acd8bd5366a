verify unreduced.hlo
