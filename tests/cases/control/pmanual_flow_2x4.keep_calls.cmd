compile pmanual_flow_2x4.hlo --mesh data=2,model=4 --keep-calls -o /dev/null
