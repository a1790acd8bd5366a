compile mesh_rebind.hlo --mesh model=4,data=2 --report json
