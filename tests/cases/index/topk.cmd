compile topk.hlo --report text
