compile bitcast_convert_pred.hlo --mesh 4 -o out.hlo
