compile select_and_scatter_halo.hlo -o /dev/null
