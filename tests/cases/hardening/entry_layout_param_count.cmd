compile entry_layout_param_count.hlo --mesh 4 -o out.hlo
