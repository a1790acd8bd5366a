compile transpose_swap_axes.hlo --report text
