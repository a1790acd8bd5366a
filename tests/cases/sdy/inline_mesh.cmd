compile inline_mesh.hlo
