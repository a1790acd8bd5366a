compile unknown_axis.hlo --report none -o unknown_axis.out.hlo
