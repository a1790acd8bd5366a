compile utf8_bom_inside.hlo -o out.hlo
