verify topk_custom_call.hlo --mesh data=1,model=2
