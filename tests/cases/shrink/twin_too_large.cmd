verify twin_too_large.hlo --shrink
