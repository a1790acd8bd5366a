compile pmanual_open_result.hlo --mesh data=2,model=2 -o /dev/null
