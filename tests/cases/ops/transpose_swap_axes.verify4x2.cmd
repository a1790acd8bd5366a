verify transpose_swap_axes.hlo --mesh data=4,model=2
