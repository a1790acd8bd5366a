verify int_divide_unreduced.hlo --mesh 4
