propagate ../../../examples/models/control/cond.hlo --explain -o /dev/null
