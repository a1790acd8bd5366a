verify utf8_bom.hlo
