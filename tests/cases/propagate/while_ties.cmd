propagate ../../../examples/models/control/while_2d.hlo
