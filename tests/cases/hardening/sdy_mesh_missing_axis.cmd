compile sdy_mesh_missing_axis.hlo --mesh data=2 -o out.hlo
