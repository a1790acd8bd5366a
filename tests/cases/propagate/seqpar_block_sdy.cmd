compile seqpar_block_sdy.hlo -o /dev/null
