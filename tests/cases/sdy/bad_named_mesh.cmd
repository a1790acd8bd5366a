compile bad_named_mesh.hlo -o bad_named_mesh.out.hlo
