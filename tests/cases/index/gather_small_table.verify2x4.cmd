verify gather_small_table.hlo --mesh data=2,model=4
