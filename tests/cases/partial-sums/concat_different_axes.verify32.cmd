verify concat_different_axes.hlo --mesh a=3,b=2
