compile maximal_no_mesh.hlo -o maximal_no_mesh.out.hlo
