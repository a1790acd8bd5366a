compile halo.hlo --explain -o /dev/null
