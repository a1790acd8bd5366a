compile bad_group_sizes.hlo -o bad_group_sizes.out.hlo
