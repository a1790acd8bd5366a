propagate conflict.hlo --explain
