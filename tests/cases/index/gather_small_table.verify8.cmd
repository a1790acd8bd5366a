verify gather_small_table.hlo --mesh data=1,model=8
