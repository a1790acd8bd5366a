compile pmanual_replicated_in_spec.hlo --mesh data=2,model=2 -o /dev/null
