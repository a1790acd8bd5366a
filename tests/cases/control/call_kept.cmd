compile call_kept.hlo --keep-calls
