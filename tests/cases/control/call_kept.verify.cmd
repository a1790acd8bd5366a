verify call_kept.hlo --keep-calls
