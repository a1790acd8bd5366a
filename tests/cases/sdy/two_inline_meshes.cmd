compile two_inline_meshes.hlo -o two_inline_meshes.out.hlo
