verify pmanual_flow_2x4.hlo --mesh data=2,model=4
