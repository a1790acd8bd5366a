compile ../../../examples/mlp_small.hlo --report-out a.txt --report-out b.txt -o /dev/null
