propagate reshape.hlo --explain
