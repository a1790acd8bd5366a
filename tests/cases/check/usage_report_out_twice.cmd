check ../../../examples/mlp.hlo --no-budget-file --report-out a.txt --report-out b.txt
