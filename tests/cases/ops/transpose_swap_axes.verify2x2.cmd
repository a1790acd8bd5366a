verify transpose_swap_axes.hlo --mesh data=2,model=2
