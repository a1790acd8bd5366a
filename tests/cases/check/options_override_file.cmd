check ../../../examples/mlp.hlo --limit peak_bytes_per_device=512MiB --max-collectives 0 --budget ../../../examples/mlp.budget
