verify call_kept.hlo --keep-calls --mesh model=4
