compile plain_iota_hint.hlo -o out.hlo
