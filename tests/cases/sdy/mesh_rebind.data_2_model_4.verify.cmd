verify mesh_rebind.hlo --mesh data=2,model=4
