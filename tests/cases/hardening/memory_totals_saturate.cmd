compile memory_totals_saturate.hlo --report json -o /dev/null
