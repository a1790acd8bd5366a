verify mesh_rebind.hlo --mesh model=4,data=2
