verify sort_rows.hlo --mesh data=2,model=4
