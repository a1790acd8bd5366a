compile passes.hlo --mesh x=2 --dump-after propagate
