compile sdy_mesh_from_header.hlo --mesh x=4 -o out.hlo
