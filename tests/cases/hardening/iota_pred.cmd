compile iota_pred.hlo --mesh 4 -o out.hlo
