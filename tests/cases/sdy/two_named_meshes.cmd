compile two_named_meshes.hlo -o two_named_meshes.out.hlo
