compile sdy_mesh_from_header.hlo --report json
