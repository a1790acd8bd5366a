verify mesh_rebind.hlo --mesh 2x4
