compile loop_origin.hlo --mesh 4 --explain -o /dev/null
