compile conv_halo.hlo -o /dev/null
