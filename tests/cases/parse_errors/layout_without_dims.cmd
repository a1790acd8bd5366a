compile layout_without_dims.hlo -o out.hlo
