compile passes.hlo --dump-after lower
