compile maximal_no_mesh.hlo --mesh 9 --report text
