propagate partial_manual.hlo --explain
