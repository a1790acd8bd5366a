verify seqpar_block_sdy.hlo
