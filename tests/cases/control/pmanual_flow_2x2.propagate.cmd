compile pmanual_flow_2x2.hlo --mesh data=2,model=2 --keep-calls --dump-after propagate
