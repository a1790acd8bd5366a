compile layout_rank_mismatch.hlo -o out.hlo
