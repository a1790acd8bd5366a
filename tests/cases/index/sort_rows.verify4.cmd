verify sort_rows.hlo --mesh data=1,model=4
