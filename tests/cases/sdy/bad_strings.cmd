compile bad_strings.hlo -o bad_strings.out.hlo
