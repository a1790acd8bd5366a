propagate reshape.hlo --mesh x=0
