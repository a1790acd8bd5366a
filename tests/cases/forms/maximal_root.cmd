compile maximal_root.hlo --report text
