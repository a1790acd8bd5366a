verify topk_custom_call.hlo --mesh data=2,model=4
