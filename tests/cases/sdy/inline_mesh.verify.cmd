verify inline_mesh.hlo
