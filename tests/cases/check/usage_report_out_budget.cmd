check ../../../examples/mlp.hlo --budget keep.budget --report-out keep.budget
