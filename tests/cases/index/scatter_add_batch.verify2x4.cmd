verify scatter_add_batch.hlo --mesh data=2,model=4
