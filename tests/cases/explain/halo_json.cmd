compile halo.hlo --explain --report json -o /dev/null
