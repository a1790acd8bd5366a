verify mlp_misaligned_small.hlo --mesh data=2,model=4
