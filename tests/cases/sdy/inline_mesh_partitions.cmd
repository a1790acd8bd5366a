compile inline_mesh_partitions.hlo -o inline_mesh_partitions.out.hlo
