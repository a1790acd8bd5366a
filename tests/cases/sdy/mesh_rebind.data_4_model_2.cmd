compile mesh_rebind.hlo --mesh data=4,model=2 --report json
