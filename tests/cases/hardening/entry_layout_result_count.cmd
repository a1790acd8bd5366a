compile entry_layout_result_count.hlo --mesh 4 -o out.hlo
