compile topk_custom_call.hlo --report text
