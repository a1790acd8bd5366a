sweep shard_map_fixed_mesh.hlo --mesh data=1,2 --mesh model=2,4
