compile mesh_rebind.hlo --mesh 2x4 --report json
