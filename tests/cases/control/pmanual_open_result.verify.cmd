verify pmanual_open_result.hlo --mesh data=2,model=2
