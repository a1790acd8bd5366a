compile select_and_scatter_halo.hlo --report json
