compile bad_inline_mesh.hlo -o bad_inline_mesh.out.hlo
