compile bad_strings.hlo --mesh x=4,y=2 -o bad_strings.out.hlo
