verify scatter_add_batch.hlo --mesh data=1,model=8
