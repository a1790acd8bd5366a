compile sdy_mesh_conflict.hlo -o out.hlo
