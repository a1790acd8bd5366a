compile reshard_merge_axes_reversed.hlo --report text
