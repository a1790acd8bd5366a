compile mesh_rebind.hlo --mesh data=2,model=4 --report json
