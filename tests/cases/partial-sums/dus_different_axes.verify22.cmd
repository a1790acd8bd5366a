verify dus_different_axes.hlo --mesh a=2,b=2
