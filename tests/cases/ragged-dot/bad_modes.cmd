compile bad_modes.hlo -o bad_modes.out.hlo
