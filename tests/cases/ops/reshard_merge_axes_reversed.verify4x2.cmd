verify reshard_merge_axes_reversed.hlo --mesh data=4,model=2
